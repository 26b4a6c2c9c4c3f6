/* CloudPivot portal: the little JavaScript there is.
 *
 * - Live task page: follows /ws/tasks/<id>/ (events, state, log) from the positions the
 *   page was rendered with; drops duplicates by seq/position; reconnects with back-off
 *   from the last position it has, so nothing is missed or shown twice.
 * - Live badges on the dashboard and the task list: /ws/dashboard/.
 * - "Will it fit?" asked again when a form's cloud-dependent part was swapped in.
 * - Small helpers: copy buttons, confirm before submit, one submit per click, tabs.
 * Every page works without it; a reload always shows the truth.
 */
(function () {
  "use strict";

  var LOG_WINDOW_BYTES = 1024 * 1024; // how much log text a following page keeps in the DOM
  var STOP_CODES = { 4401: "You are logged out: reload to log in again.", 4404: "This task is not available." };
  var liveState = { state: "", text: "" };

  // ------------------------------------------------------------------ live connection status
  function setLiveStatus(state, text) {
    liveState = { state: state, text: text };
    document.querySelectorAll("[data-live-status]").forEach(function (el) {
      el.dataset.state = state;
      el.textContent = text;
    });
  }
  document.addEventListener("htmx:afterSettle", function () {
    if (liveState.state) setLiveStatus(liveState.state, liveState.text);
  });

  // "Will it fit?" (#fit-verdict, hx-trigger "cp-fit-refresh from:body" with a delay that debounces): asked
  // again when a field of its form changes or is typed in. A field that itself re-renders part of the form
  // (the cloud and project selects: hx-post/hx-get) asks once that part was swapped in, not before: the page's
  // sync views run one at a time, and the refresh must not wait behind a verdict on the old choices.
  function askFit() {
    if (window.htmx && document.getElementById("fit-verdict")) window.htmx.trigger(document.body, "cp-fit-refresh");
  }
  ["change", "input"].forEach(function (type) {
    document.addEventListener(type, function (event) {
      var field = event.target;
      var verdict = document.getElementById("fit-verdict");
      if (!verdict || !field.form || !field.form.contains(verdict)) return;
      if (field.hasAttribute("hx-post") || field.hasAttribute("hx-get") || field.hasAttribute("data-rerender")) return;
      askFit();
    });
  });

  // A field that re-renders the part of the form it is in (data-rerender) is swapped along with it, and htmx
  // wires a swapped-in element up only once the swap settles: a change in that instant would be lost. So the
  // request sits on the host around that part (data-rerender-host, never swapped), asked from here.
  document.addEventListener("change", function (event) {
    var field = event.target;
    if (!window.htmx || !field.hasAttribute || !field.hasAttribute("data-rerender")) return;
    var host = field.closest("[data-rerender-host]");
    if (host) window.htmx.trigger(host, "cp-rerender");
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    var detail = event.detail || {};
    var ids = [detail.elt && detail.elt.id, detail.target && detail.target.id];
    if (ids.indexOf("launch-choices") >= 0 || ids.indexOf("submit-cloud-fields") >= 0) askFit();
  });

  // ------------------------------------------------------------------ a websocket that resumes
  function liveSocket(path, query, onMessage) {
    var socket = null;
    var failures = 0;
    var timer = null;
    var stopped = false;

    function open() {
      clearTimeout(timer);
      var scheme = location.protocol === "https:" ? "wss://" : "ws://";
      socket = new WebSocket(scheme + location.host + path + "?" + new URLSearchParams(query()).toString());
      socket.onopen = function () {
        failures = 0;
        setLiveStatus("live", "Live");
      };
      socket.onmessage = function (event) {
        var message;
        try {
          message = JSON.parse(event.data);
        } catch (err) {
          return;
        }
        onMessage(message);
      };
      socket.onclose = function (event) {
        socket = null;
        if (STOP_CODES[event.code]) {
          stopped = true;
          setLiveStatus("offline", STOP_CODES[event.code]);
          return;
        }
        if (stopped) return;
        if (event.code === 1013) failures = Math.max(failures, 2); // the server's database is away: ~4 s
        var delay = Math.min(15000, 1000 * Math.pow(2, failures)) * (0.75 + Math.random() / 2);
        failures += 1;
        setLiveStatus("reconnecting", "Reconnecting…");
        timer = setTimeout(open, delay);
      };
    }
    function reopenNow() {
      if (!stopped && socket === null) open();
    }
    window.addEventListener("online", reopenNow);
    document.addEventListener("visibilitychange", function () {
      if (document.visibilityState === "visible") reopenNow();
    });
    open();
  }

  function debounce(fn, ms) {
    var timer = null;
    return function () {
      clearTimeout(timer);
      timer = setTimeout(fn, ms);
    };
  }

  function updateBadges(taskId, message) {
    var found = 0;
    document.querySelectorAll('[data-task-badge="' + taskId + '"]').forEach(function (badge) {
      found += 1;
      if (message.seq < Number(badge.dataset.seq || 0)) return; // older news than the page shows
      if (badge.dataset.state !== message.state) {
        badge.classList.remove("changed");
        void badge.offsetWidth; // restart the highlight animation
        badge.classList.add("changed");
      }
      badge.className = badge.className.replace(/badge-\w+/, "badge-" + message.badge);
      badge.dataset.state = message.state;
      badge.dataset.seq = message.seq;
      badge.textContent = message.label;
      if (message.reason) badge.title = message.reason;
    });
    return found;
  }

  // ------------------------------------------------------------------ the task page
  function initTask(root) {
    var taskId = root.dataset.liveTask;
    var logEl = document.getElementById("task-log");
    var followBox = document.getElementById("log-follow");
    var eventsEl = document.getElementById("task-events");
    var earlier = document.getElementById("log-earlier");
    var earlierNote = document.getElementById("log-earlier-note");
    var lastSeq = Number(root.dataset.afterSeq || 0);
    var stateSeq = lastSeq;
    var log = {
      attempt: Number(root.dataset.logAttempt || 0),
      start: Number(root.dataset.logStart || 0),
      end: Number(root.dataset.logEnd || 0),
    };
    // The shown log is a list of text nodes, each with its byte range, so the window can be trimmed exactly.
    var segments = [];
    if (logEl.firstChild) segments.push({ node: logEl.firstChild, start: log.start, end: log.end });
    var refreshPanels = debounce(function () {
      if (window.htmx) window.htmx.trigger(document.body, "cp-task-changed");
    }, 200);

    function showEarlier() {
      earlier.hidden = log.start <= 0;
      earlierNote.textContent = formatBytes(log.start) + " of earlier text not shown.";
    }
    function atBottom() {
      return logEl.scrollHeight - logEl.scrollTop - logEl.clientHeight < 24;
    }
    function clearLog() {
      segments.forEach(function (s) {
        s.node.remove();
      });
      segments = [];
    }
    function appendLog(message) {
      var node = document.createTextNode(message.data);
      logEl.appendChild(node);
      segments.push({ node: node, start: message.position, end: message.next_position });
      log.end = message.next_position;
      document.getElementById("log-empty").hidden = true;
      document.getElementById("log-download").hidden = false;
      if (followBox.checked) {
        while (segments.length > 1 && log.end - segments[1].start > LOG_WINDOW_BYTES) {
          segments.shift().node.remove();
        }
        log.start = segments[0].start;
        logEl.scrollTop = logEl.scrollHeight;
      }
      showEarlier();
    }
    function onLog(message) {
      if (message.attempt < log.attempt) return;
      if (message.attempt > log.attempt) {
        clearLog();
        log = { attempt: message.attempt, start: message.position, end: message.position };
        document.getElementById("log-meta").textContent = "attempt " + message.attempt;
        refreshPanels();
      }
      if (message.next_position <= log.end) return; // already shown
      if (message.position !== log.end) {
        // The server skipped a long backlog: restart the window here; the rest is a click away.
        clearLog();
        log.start = log.end = message.position;
      }
      appendLog(message);
    }
    function onEvent(message) {
      if (message.seq <= lastSeq) return;
      lastSeq = message.seq;
      var item = document.createElement("li");
      item.dataset.seq = message.seq;
      item.className = "event-" + message.event;
      var time = document.createElement("time");
      time.dateTime = message.time;
      time.textContent = message.time.substring(11, 19);
      var type = document.createElement("span");
      type.className = "event-type";
      type.textContent = message.event === "state" && message.data && message.data.to ? "→ " + message.data.to : message.event;
      var text = document.createElement("span");
      text.className = "event-message";
      text.textContent = message.message;
      item.append(time, type, text);
      eventsEl.appendChild(item);
      eventsEl.scrollTop = eventsEl.scrollHeight;
      if (message.event !== "progress") refreshPanels();
    }
    function onState(message) {
      if (message.seq < stateSeq) return;
      stateSeq = message.seq;
      var badge = document.querySelector('[data-task-badge="' + taskId + '"]');
      var changed = badge && badge.dataset.state !== message.state;
      updateBadges(taskId, message);
      if (changed) {
        setLiveStatus("live", "Live · now " + message.label.toLowerCase());
        refreshPanels();
      }
    }

    logEl.addEventListener("scroll", function () {
      followBox.checked = atBottom();
    });
    followBox.addEventListener("change", function () {
      if (followBox.checked) logEl.scrollTop = logEl.scrollHeight;
    });
    logEl.scrollTop = logEl.scrollHeight;
    showEarlier();

    document.getElementById("log-earlier-button").addEventListener("click", function (event) {
      var button = event.currentTarget;
      button.disabled = true;
      var url = root.dataset.logUrl + "?attempt=" + log.attempt + "&before=" + log.start;
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (!response.ok) throw new Error("HTTP " + response.status);
          return response.json();
        })
        .then(function (piece) {
          if (piece.attempt !== log.attempt || piece.end !== log.start) return; // the log moved on meanwhile
          var height = logEl.scrollHeight;
          var node = document.createTextNode(piece.data);
          logEl.insertBefore(node, logEl.firstChild);
          segments.unshift({ node: node, start: piece.start, end: piece.end });
          log.start = piece.start;
          logEl.scrollTop += logEl.scrollHeight - height;
          showEarlier();
        })
        .catch(function (err) {
          earlierNote.textContent = "Could not load earlier text (" + err.message + ").";
        })
        .finally(function () {
          button.disabled = false;
        });
    });

    liveSocket(
      "/ws/tasks/" + taskId + "/",
      function () {
        return { after_seq: lastSeq, log_attempt: log.attempt, log_position: log.end };
      },
      function (message) {
        if (message.type === "event") onEvent(message);
        else if (message.type === "state") onState(message);
        else if (message.type === "log") onLog(message);
      }
    );
  }

  // ------------------------------------------------------------------ dashboard and task list
  function section(state) {
    if (state === "PENDING" || state === "RETRY_WAIT") return "queued";
    if (["SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT"].indexOf(state) >= 0) return "recent";
    return "running";
  }

  function initDashboard(root) {
    var since = root.dataset.since;
    var user = root.dataset.user;
    var refresh = debounce(function () {
      if (window.htmx && document.getElementById("dashboard-tasks")) {
        window.htmx.trigger(document.body, "cp-dashboard-refresh");
      }
    }, 300);
    liveSocket(
      "/ws/dashboard/",
      function () {
        return { since: since };
      },
      function (message) {
        if (message.type !== "task") return;
        if (message.since) since = message.since;
        var badge = document.querySelector('[data-task-badge="' + message.task_id + '"]');
        var before = badge ? badge.dataset.state : null;
        updateBadges(message.task_id, message);
        if (message.owner === user && (!badge || section(before) !== section(message.state))) refresh();
      }
    );
  }

  // ------------------------------------------------------------------ set page
  // A set's elements are tasks of its project: the dashboard stream tells of each change, which redraws its
  // badge and asks htmx for the set's panels (progress and elements) again.
  function initSet(root) {
    var since = root.dataset.since;
    var project = root.dataset.project;
    var refresh = debounce(function () {
      if (window.htmx) window.htmx.trigger(document.body, "cp-set-changed");
    }, 300);
    liveSocket(
      "/ws/dashboard/",
      function () {
        return { since: since };
      },
      function (message) {
        if (message.type !== "task") return;
        if (message.since) since = message.since;
        updateBadges(message.task_id, message);
        if (message.project === project) refresh();
      }
    );
  }

  // ------------------------------------------------------------------ small helpers
  function formatBytes(n) {
    if (n < 1024) return n + " bytes";
    if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " KiB";
    return (n / 1024 / 1024).toFixed(1) + " MiB";
  }

  function copyText(button) {
    var target = document.querySelector(button.dataset.copy);
    if (!target) return;
    var text = target.textContent;
    var label = button.textContent;
    function done(ok) {
      button.textContent = ok ? "Copied" : "Select and copy";
      setTimeout(function () {
        button.textContent = label;
      }, 1500);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(
        function () {
          done(true);
        },
        function () {
          done(false);
        }
      );
      return;
    }
    var range = document.createRange();
    range.selectNodeContents(target);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    var ok = false;
    try {
      ok = document.execCommand("copy");
    } catch (err) {
      ok = false;
    }
    done(ok);
  }

  function initTabs(tablist) {
    var tabs = Array.prototype.slice.call(tablist.querySelectorAll('[role="tab"]'));
    function select(tab, focus) {
      tabs.forEach(function (other) {
        var selected = other === tab;
        other.setAttribute("aria-selected", selected ? "true" : "false");
        other.tabIndex = selected ? 0 : -1;
        document.getElementById(other.getAttribute("aria-controls")).hidden = !selected;
      });
      if (focus) tab.focus();
      var url = new URL(location.href);
      url.searchParams.set("mode", tab.id === "tab-raw" ? "raw" : "form");
      history.replaceState(null, "", url);
    }
    tabs.forEach(function (tab, index) {
      tab.tabIndex = tab.getAttribute("aria-selected") === "true" ? 0 : -1;
      tab.addEventListener("click", function (event) {
        event.preventDefault();
        select(tab, false);
      });
      tab.addEventListener("keydown", function (event) {
        var next = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
        if (!next) return;
        event.preventDefault();
        select(tabs[(index + next + tabs.length) % tabs.length], true);
      });
    });
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy]");
    if (button) copyText(button);
  });
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      event.preventDefault();
      return;
    }
    if (form.hasAttribute("data-once")) {
      form.querySelectorAll('button[type="submit"]').forEach(function (b) {
        setTimeout(function () {
          b.disabled = true;
        }, 0);
      });
    }
  });
  window.addEventListener("pageshow", function () {
    document.querySelectorAll("form[data-once] button[type=submit]").forEach(function (b) {
      b.disabled = false;
    });
  });

  document.addEventListener("DOMContentLoaded", function () {
    var task = document.querySelector("[data-live-task]");
    if (task && "WebSocket" in window) initTask(task);
    var dashboard = document.querySelector("[data-live-dashboard]");
    if (dashboard && "WebSocket" in window) initDashboard(dashboard);
    var taskSet = document.querySelector("[data-live-set]");
    if (taskSet && "WebSocket" in window) initSet(taskSet);
    document.querySelectorAll("[data-tabs]").forEach(initTabs);
  });
})();
