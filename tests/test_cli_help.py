"""`ledgerfold --help` lists every command with a whole line of what it does (click cuts a
long first sentence to "...", which said "Force-compact conversations with the built-in..."),
and says where a newcomer starts."""

from __future__ import annotations

import re

from click.testing import CliRunner

from ledgerfold._cli import cli


def _help(*args: str) -> str:
    result = CliRunner().invoke(cli, [*args, "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.output


def test_every_command_is_listed_whole_in_the_top_level_help() -> None:
    text = _help()
    listing = text[text.index("Commands:") :]
    rows = dict(re.findall(r"^  (\S+) +(.+)$", listing, flags=re.M))
    assert sorted(rows) == sorted(cli.commands)
    for name, line in rows.items():
        assert not line.endswith("..."), name
        assert line.endswith("."), name
        assert len(f"  {name:<12}{line}") <= 80, name


def test_the_top_level_help_says_where_to_start() -> None:
    assert "ledgerfold demo" in _help() and "ledgerfold COMMAND --help" in _help()


def test_compact_help_says_which_conversations_and_that_no_model_is_called() -> None:
    text = " ".join(_help("compact").split())
    assert "every conversation of DB (or only --conversation ID)" in text
    assert "no model is called" in text
    assert "--conversation ID" in text


def test_demo_db_option_takes_a_path() -> None:
    assert "--db PATH" in _help("demo")


def test_a_missing_argument_or_unknown_option_shows_the_usage_on_its_line() -> None:
    """ "Missing argument 'QUERY'." said nothing of where QUERY goes: the one error line now
    carries the command's usage and where its help is; a bad value (it names its option and
    range already) does not."""
    runner = CliRunner()
    for args, usage in (
        (["search", "db", "c"], "ledgerfold search [OPTIONS] DB CONVERSATION QUERY"),
        (["purge", "db", "c", "--through", "3"], "ledgerfold purge [OPTIONS] DB CONVERSATION"),
        (["list", "--nope", "db"], "ledgerfold list [OPTIONS] DB"),
    ):
        result = runner.invoke(cli, args, prog_name="ledgerfold")
        assert result.exit_code == 2
        (line,) = result.stderr.splitlines()
        command = " ".join(usage.split()[:2])
        assert line.endswith(f" Usage: {usage} (`{command} --help` says more)"), line
    bad = runner.invoke(cli, ["search", "db", "c", "q", "--limit", "0"], prog_name="ledgerfold")
    assert bad.exit_code == 2 and "Usage:" not in bad.stderr


def test_the_readme_lists_every_option_of_every_command() -> None:
    """The README's command-line block is a newcomer's whole map of the commands: each has a
    line there, and that line names each of its options (`context --preview` was missing)."""
    from pathlib import Path

    import click

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index("## Command line") :]
    block = block[block.index("```sh") : block.index("```", block.index("```sh") + 5)]
    missing = []
    for name, command in sorted(cli.commands.items()):
        lines = [line for line in block.splitlines() if line.startswith(f"ledgerfold {name} ")]
        assert lines, name
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                long = [opt for opt in param.opts if opt.startswith("--")]
                if long and not any(long[0] in line for line in lines):
                    missing.append(f"{name} {long[0]}")
    assert missing == []
