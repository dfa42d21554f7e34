from __future__ import annotations

from agentify.gateway.confirm_prompt import confirmation_message


def test_every_key_is_listed_and_places_come_first_in_full() -> None:
    long_path = "/data/" + "d" * 500 + "/file.txt"
    message = confirmation_message(
        "fs",
        "move_file",
        {"body": "b" * 1000, "options": {"overwrite": True}, "destination": long_path, "source": "/tmp/a"},
        "fs.move_file is marked destructive by its server",
    )
    lines = message.splitlines()
    keys = [line.split(":")[0] for line in lines if line.startswith("- ")]
    assert keys[:2] == ["- destination", "- source"] and set(keys) == {
        "- body",
        "- options.overwrite",
        "- destination",
        "- source",
    }
    assert f"- destination: {long_path}" in lines
    assert "- options.overwrite: true" in lines
    assert "1000 characters in all" in message and "b" * 161 not in message
    assert "marked destructive" in message


def test_a_call_without_arguments_says_so() -> None:
    assert "No arguments." in confirmation_message("web", "browser_close", {}, "listed in tools.confirm")


def test_a_place_nested_in_a_list_or_object_is_shown_whole_and_first() -> None:
    files = [{"path": "a.txt", "content": "c" * 5000}, {"path": ".github/workflows/x.yml", "content": "run"}]
    message = confirmation_message("gh", "push_files", {"files": files, "spec": {"body": "b" * 300}}, "why")
    lines = message.splitlines()
    assert "- files.0.path: a.txt" in lines and "- files.1.path: .github/workflows/x.yml" in lines
    assert message.index("files.1.path") < message.index("files.0.content")
    assert "5000 characters in all" in message and "- files.1.content: run" in lines
