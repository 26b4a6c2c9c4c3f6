"""`cloudpivot completion bash|zsh|fish`: scripts generated from the argument parser itself,
so every command and option is completed and none goes stale."""

from __future__ import annotations

import argparse

from cloudpivot_cli import exitcodes
from cloudpivot_cli.parsing import add_command

Tree = dict[str, tuple[list[str], list[str], dict[str, str]]]  # path → (sub-commands, options, help per word)


def walk(parser: argparse.ArgumentParser, path: str = "", tree: Tree | None = None) -> Tree:
    tree = {} if tree is None else tree
    commands: list[str] = []
    options: list[str] = []
    helps: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                helps[choice.dest] = choice.help or ""
            for name, sub in action.choices.items():
                commands.append(name)
                walk(sub, f"{path} {name}".strip(), tree)
        else:
            for flag in action.option_strings:
                if flag.startswith("--"):
                    options.append(flag)
                    helps[flag] = "" if action.help == argparse.SUPPRESS else (action.help or "")
    tree[path] = (commands, options, helps)
    return tree


def bash(tree: Tree) -> str:
    cases = "\n".join(f'        "{path}") words="{" ".join(cmds + opts)}" ;;' for path, (cmds, opts, _) in tree.items())
    return f"""# cloudpivot completion for bash: source <(cloudpivot completion bash)
_cloudpivot_words() {{
    local words=""
    case "$1" in
{cases}
    esac
    echo "$words"
}}
_cloudpivot() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" path="" i word
    for ((i = 1; i < COMP_CWORD; i++)); do
        word="${{COMP_WORDS[i]}}"
        case " $(_cloudpivot_words "$path") " in
            *" $word "*) [[ "$word" != -* ]] && path="${{path:+$path }}$word" ;;
        esac
    done
    COMPREPLY=($(compgen -W "$(_cloudpivot_words "$path")" -- "$cur"))
}}
complete -o default -o bashdefault -F _cloudpivot cloudpivot
"""


def zsh(tree: Tree) -> str:
    return "#compdef cloudpivot\n# cloudpivot completion for zsh: source <(cloudpivot completion zsh)\n" + (
        "autoload -U +X bashcompinit && bashcompinit\n" + bash(tree)
    )


def fish(tree: Tree) -> str:
    def quote(text: str) -> str:
        return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"

    lines = ["# cloudpivot completion for fish: cloudpivot completion fish | source", "complete -c cloudpivot -f"]
    for path, (commands, options, helps) in tree.items():
        words = path.split()
        if words:
            condition = " and ".join(f"__fish_seen_subcommand_from {word};" for word in words)
            condition = condition.rstrip(";")
            if commands:
                condition += "; and not __fish_seen_subcommand_from " + " ".join(commands)
        else:
            condition = "__fish_use_subcommand"
        for name in commands:
            lines.append(f"complete -c cloudpivot -n {quote(condition)} -a {name} -d {quote(helps.get(name, ''))}")
        for flag in options:
            lines.append(f"complete -c cloudpivot -n {quote(condition)} -l {flag[2:]} -d {quote(helps.get(flag, ''))}")
    lines.append("complete -c cloudpivot -n '__fish_seen_subcommand_from -f --file' -F")
    return "\n".join(lines) + "\n"


SHELLS = {"bash": bash, "zsh": zsh, "fish": fish}


def register(commands, root: argparse.ArgumentParser) -> None:
    def run(args) -> int:
        print(SHELLS[args.shell](walk(root)), end="")
        return exitcodes.OK

    p = add_command(
        commands,
        "completion",
        "print a shell completion script",
        run,
        "  source <(cloudpivot completion bash)                 # in ~/.bashrc\n"
        "  source <(cloudpivot completion zsh)                  # in ~/.zshrc\n"
        "  cloudpivot completion fish > ~/.config/fish/completions/cloudpivot.fish\n",
    )
    p.add_argument("shell", choices=sorted(SHELLS))
