from __future__ import annotations

from agentify.gateway.confirm_prompt import confirmation_message, unshowable


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


def test_a_path_is_shown_where_it_lands_however_it_is_written() -> None:
    """The review's path: 900 `x/../` hops once hid the file it overwrote behind a cut."""
    path = "scratch/" + "x/../" * 900 + "../IMPORTANT.txt"
    message = confirmation_message("fs", "write_file", {"path": path, "content": "y"}, "why")
    (line,) = [line for line in message.splitlines() if line.startswith("- path:")]
    assert line.startswith("- path: IMPORTANT.txt ")
    assert line.endswith("../IMPORTANT.txt)") and f"{len(path)} characters" in line


def test_a_url_is_shown_with_the_host_it_goes_to() -> None:
    url = "https://docs.example.com@evil.example/" + "p" * 3000 + "?q=END"
    message = confirmation_message("web", "browser_navigate", {"url": url}, "why")
    (line,) = [line for line in message.splitlines() if line.startswith("- url:")]
    assert line.startswith("- url: host evil.example: https://docs.example.com@evil.example/pp")
    assert "q=END" in line and len(line) < 600


def test_a_long_value_shows_its_head_and_its_tail() -> None:
    content = "HEAD" + "x" * 5000 + "TAIL"
    message = confirmation_message("fs", "write_file", {"path": "/tmp/a", "content": content}, "why")
    (line,) = [line for line in message.splitlines() if line.startswith("- content:")]
    assert "HEAD" in line and "TAIL" in line and "5008 characters in all" in line and len(line) < 400


def test_control_format_and_bidi_characters_are_escaped_in_keys_and_values() -> None:
    arguments = {
        "content": "hello\n- path: /safe/place.txt\nAccept to run it",
        "path": "/tmp/\u202etxt.exe",
        "note\r\n- ok": "\u200bzero\x1b[2Jwidth\u2028line",
    }
    message = confirmation_message("fs", "write\nfile", arguments, "why")
    lines = message.splitlines()
    assert not any(line.startswith("- path: /safe") for line in lines)
    assert lines[0] == "agentify wants to run write\\nfile on backend fs."
    assert "- path: /tmp/\\u202etxt.exe" in lines
    assert "- note\\r\\n- ok: \\u200bzero\\x1b[2Jwidth\\u2028line" in lines
    for character in ("\u202e", "\u200b", "\x1b", "\u2028", "\r"):
        assert character not in message
    assert len(lines) == 3 + 3 + 1


def test_a_place_too_long_to_show_is_never_asked_about() -> None:
    deep = "/data/" + "/".join(["d" * 200] * 30) + "/file.txt"
    assert unshowable({"files": [{"path": deep}]}) is not None
    assert "files.0.path" in (unshowable({"files": [{"path": deep}]}) or "")
    assert unshowable({"path": "/data/" + "x/../" * 2000 + "file.txt", "content": "c" * 100_000}) is None
