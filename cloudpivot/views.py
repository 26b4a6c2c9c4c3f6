from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from clusters.selectors import connections_visible_to
from tasks.selectors import tasks_visible_to


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """A minimal start page until the portal lands: recent tasks and usable clouds."""
    return render(
        request,
        "home.html",
        {
            "tasks": tasks_visible_to(user=request.user)[:20],
            "clouds": connections_visible_to(user=request.user),
        },
    )
