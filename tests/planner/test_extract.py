from __future__ import annotations

from pathlib import Path

from agentify.planner.offline.extract import analyse
from agentify.planner.offline.fill import fill
from tests.planner.support import EXAMPLES, catalog_of, example_catalog, task, tool


def mentioned(query: str, **where: object) -> list[tuple[str, object]]:
    return [(m.kind, m.value) for m in analyse(task(query, **where)).items]  # type: ignore[arg-type]


def test_a_bare_localhost_address_becomes_an_http_url_and_a_domain_an_https_one() -> None:
    assert mentioned("open localhost:3000/login") == [("url", "http://localhost:3000/login")]
    assert mentioned("visit github.com/takahirom/arbigent.") == [("url", "https://github.com/takahirom/arbigent")]
    assert mentioned("go to http://127.0.0.1:8080/a?b=1") == [("url", "http://127.0.0.1:8080/a?b=1")]


def test_file_names_and_version_numbers_are_not_urls() -> None:
    kinds = [kind for kind, _ in mentioned("compare index.html with notes.txt for 1.2.3.4")]
    assert kinds == ["path", "path"]


def test_paths_resolve_against_the_working_directory(tmp_path: Path) -> None:
    assert mentioned("read docs/guide.md", cwd=tmp_path) == [("path", str(tmp_path / "docs" / "guide.md"))]
    assert mentioned("read /etc/hostname", cwd=tmp_path) == [("path", "/etc/hostname")]
    assert mentioned("list the files here", cwd=tmp_path) == [("path", str(tmp_path))]


def test_without_a_working_directory_paths_resolve_against_the_active_document(tmp_path: Path) -> None:
    document = tmp_path / "src" / "app.py"
    assert mentioned("read ../README.md", cwd=None, document=document) == [("path", str(tmp_path / "README.md"))]
    assert mentioned("explain this file", cwd=None, document=document) == [("path", str(document))]
    assert mentioned("read notes.txt", cwd=None) == [("path", None)]


def test_a_bare_word_is_a_path_only_when_it_exists_or_is_named(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    assert mentioned("list the files in docs", cwd=tmp_path) == [("path", str(tmp_path / "docs"))]
    assert mentioned("list the files in src", cwd=tmp_path) == []
    assert mentioned("run the docs tests", cwd=tmp_path) == []
    assert mentioned("make a folder called reports", cwd=tmp_path) == [("path", str(tmp_path / "reports"))]


def test_quoted_texts_globs_and_sizes_are_mentions() -> None:
    assert mentioned('type "hello world" and search *.md') == [("quoted", "hello world"), ("glob", "*.md")]
    assert mentioned("resize to 1280x720") == [("number", 1280), ("number", 720)]


def test_a_run_of_digits_too_long_for_a_number_is_no_value_and_no_crash() -> None:
    nines = "9" * 5000
    assert mentioned(f"check that {nines} steps") == [] and mentioned(f"resize to {nines}x5") == []
    assert mentioned("wait 30 seconds") == [("number", 30)]


def test_a_number_said_in_words_is_one_before_what_it_counts_only() -> None:
    assert mentioned("show the last twenty lines of notes.txt")[0] == ("number", 20)
    assert mentioned("wait five seconds") == [("number", 5)]
    # "two bedrooms" may be words an API takes as they are, "the one" is no count, and "one" is never a number
    assert mentioned("find a flat with two bedrooms") == []
    assert mentioned("wait one second") == []
    assert mentioned("the last twenty five lines")[0] == ("number", 25)  # not 5, as a review found
    assert mentioned("the last two hundred lines")[0] == ("number", 200)
    assert mentioned("the last five twenty lines")[0] == ("quoted", "twenty")  # no number: a value nothing takes


def test_a_folder_said_beside_a_path_in_it_is_one_place_unless_the_task_joins_them() -> None:
    config = str(EXAMPLES / "arbigent" / "arbigent-config.yaml")
    assert mentioned("the arbigent config file arbigent/arbigent-config.yaml") == [("path", config)]
    both = mentioned("show the tree of arbigent and arbigent/arbigent-result")
    assert both == [("path", str(EXAMPLES / "arbigent")), ("path", str(EXAMPLES / "arbigent" / "arbigent-result"))]


def test_mentions_do_not_count_as_words_of_the_task() -> None:
    mentions = analyse(task("read arbigent/arbigent-project.yaml"))
    assert "arbigent" not in mentions.user_text
    assert "path" in mentions.hints and "single" in mentions.hints


def test_required_arguments_are_filled_by_role_and_validate() -> None:
    catalog = example_catalog()
    write = catalog.find("filesystem", "write_file")
    assert write is not None
    filled = fill(write, analyse(task('write "buy milk" to todo.txt')))
    assert filled.complete and filled.arguments == {"path": str(EXAMPLES / "todo.txt"), "content": "buy milk"}
    assert write.validation_error(filled.arguments) is None
    move = catalog.find("filesystem", "move_file")
    assert move is not None
    filled = fill(move, analyse(task("rename a.txt to b.txt")))
    assert filled.arguments == {"source": str(EXAMPLES / "a.txt"), "destination": str(EXAMPLES / "b.txt")}


def test_scenario_ids_come_from_the_schema_enum_in_the_order_named() -> None:
    scenarios = example_catalog().find("arbigent", "run-arbigent-scenarios")
    assert scenarios is not None
    filled = fill(scenarios, analyse(task("run scenarios checkout and login-wrong-password")))
    assert filled.arguments == {"scenarioIds": ["checkout", "login-wrong-password"]}
    assert fill(scenarios, analyse(task("run the dark mode scenario"))).missing


def test_an_email_address_is_a_text_that_the_argument_named_next_to_it_takes() -> None:
    assert mentioned("send alerts to my email at jane.doe+ops@company.com, daily") == [
        ("email", "jane.doe+ops@company.com")
    ]
    assert mentioned("open https://user@example.com/x") == [("url", "https://user@example.com/x")]
    alerts = tool(
        "create_alert",
        "Create a data alert",
        {"frequency": {"type": "string", "enum": ["daily", "weekly"]}, "email": {"type": "string"}},
        "frequency",
    )
    create = catalog_of(alerts, backend="reports").find("reports", "create_alert")
    assert create is not None
    filled = fill(create, analyse(task("send weekly alerts to my email at jane@company.com")))
    assert filled.complete and filled.arguments == {"frequency": "weekly", "email": "jane@company.com"}
    unplaced = fill(create, analyse(task("send weekly alerts to jane@company.com")))  # no word names `email`
    assert not unplaced.complete and [m.text for m in unplaced.unplaced] == ["jane@company.com"]
    notify = catalog_of(tool("notify", "Notify the team", {"message": {"type": "string"}}, "message"), backend="chat")
    message = notify.find("chat", "notify")
    assert message is not None  # a required text that is not for an address does not take one
    assert "message" not in fill(message, analyse(task("notify the team that jane@company.com joined"))).arguments
    for path in ("cat /tmp/x/logo@2x.png", "open a file called report@2024.pdf", "cat ~/notes@home.md"):
        assert "email" not in [kind for kind, _ in mentioned(path)], path


def test_a_quoted_choice_fills_its_enum_and_no_other_argument() -> None:
    ride = tool(
        "book_ride",
        "Book a ride",
        {"type": {"type": "string", "enum": ["plus", "comfort"]}, "pickup": {"type": "string"}},
        "type",
        "pickup",
    )
    book = catalog_of(ride, backend="rides").find("rides", "book_ride")
    assert book is not None
    filled = fill(book, analyse(task("I need a 'Plus' ride")))
    assert filled.arguments == {"type": "plus"} and not filled.complete  # 'Plus' is not also the pickup
    filled = fill(book, analyse(task("I need a 'Plus' ride from '221B Baker Street'")))
    assert filled.arguments == {"type": "plus", "pickup": "221B Baker Street"}


def test_a_schema_default_fills_a_required_argument_and_a_named_value_beats_it() -> None:
    console = example_catalog().find("browser", "browser_console_messages")
    assert console is not None
    assert fill(console, analyse(task("show the console messages"))).arguments == {"level": "info"}
    assert fill(console, analyse(task("show the console errors"))).arguments == {"level": "error"}


def test_an_optional_argument_takes_a_value_only_when_the_words_next_to_it_name_it() -> None:
    catalog = example_catalog()
    read = catalog.find("filesystem", "read_text_file")
    find = catalog.find("browser", "browser_find")
    assert read is not None and find is not None
    assert fill(read, analyse(task("show the last 20 lines of notes.txt"))).arguments["tail"] == 20
    unrelated = fill(find, analyse(task("find all yaml files under arbigent")))
    assert "filename" not in unrelated.arguments and unrelated.unplaced


def test_an_optional_choice_of_several_words_is_taken_when_the_task_says_it() -> None:
    request = example_catalog().find("browser", "browser_network_request")
    assert request is not None
    body = fill(request, analyse(task("show me the response body of request 4")))
    assert body.arguments == {"index": 4, "part": "response-body"}
    # One word of a choice is not the choice: "the response of request 4" leaves `part` out.
    assert fill(request, analyse(task("show me the response of request 4"))).arguments == {"index": 4}
    # Nor is a choice that several arguments have: "no preference" is said of motion, not of `contrast`.
    media = example_catalog().find("browser", "browser_emulate_media")
    assert media is not None
    print_media = fill(media, analyse(task("emulate print media, no preference on reduced motion")))
    assert print_media.arguments == {"media": "print"}


def test_a_value_two_optional_arguments_are_named_for_nearly_as_well_is_not_placed() -> None:
    wait = example_catalog().find("browser", "browser_wait_for")
    assert wait is not None
    assert fill(wait, analyse(task("wait for 'Done' to appear"))).arguments == {"text": "Done"}
    gone = fill(wait, analyse(task("wait till the 'Loading…' spinner text disappears")))
    assert gone.arguments == {} and [m.text for m in gone.unplaced] == ["Loading…"]
    # Nor does a quoted text go to the plain `text` when a word near it names another: "gone" of `textGone`.
    assert fill(wait, analyse(task("wait until 'Loading' is gone"))).arguments == {}


def test_a_choice_said_after_by_fills_the_argument_named_for_it() -> None:
    sizes = example_catalog().find("filesystem", "list_directory_with_sizes")
    assert sizes is not None
    biggest = fill(sizes, analyse(task("list arbigent/arbigent-result by file size, biggest first")))
    assert biggest.arguments == {"path": str(EXAMPLES / "arbigent" / "arbigent-result"), "sortBy": "size"}
    assert "sortBy" not in fill(sizes, analyse(task("list arbigent with their file sizes"))).arguments


def test_what_cannot_be_filled_is_reported_with_the_argument_and_its_description() -> None:
    click = example_catalog().find("browser", "browser_click")
    assert click is not None
    filled = fill(click, analyse(task("click the Sign in button")))
    assert not filled.complete and "`target`" in filled.missing[0] and "element" in filled.missing[0]
    echo = catalog_of(tool("echo", "Echo", {"text": {"type": "string"}}, "text")).tools["demo__echo"]
    assert fill(echo, analyse(task("echo hi"))).missing
    assert fill(echo, analyse(task('echo "a" and "b"'))).missing


def test_what_a_task_excludes_is_set_apart_up_to_the_end_of_its_sentence_and_never_ends_inside_a_value() -> None:
    def excluded(query: str) -> list[tuple[str, list[object]]]:
        found = analyse(task(query), exclusions_apart=True)
        return [(x.text, [m.value for m in x.values]) for x in found.left_out]

    assert excluded("run every scenario but checkout. Then list them") == [("but checkout", [])]
    noise = "leave out '*.png'"  # a comma followed by more than an item of a list ends it
    assert excluded(f"the tree of arbigent but {noise}, the screenshots are just noise") == [(noise, ["*.png"])]
    quoted = "except 'checkout. then logout'"
    assert excluded(f"run all scenarios {quoted}. And more") == [(quoted, ["checkout. then logout"])]
    assert excluded("read notes.txt, not arbigent/arbigent-config.yaml") == [
        (", not arbigent/arbigent-config.yaml", [str(EXAMPLES / "arbigent" / "arbigent-config.yaml")])
    ]
    assert excluded("write 'all but one, except none' to notes.txt") == []  # markers inside a value are none
    # A search keeps the words: they are the topic's.
    assert analyse(task("run every scenario but checkout")).left_out == ()


def test_an_order_in_words_fills_the_argument_named_for_the_order() -> None:
    sizes = example_catalog().find("filesystem", "list_directory_with_sizes")
    assert sizes is not None
    biggest = fill(sizes, analyse(task("list them with their sizes, biggest first")))
    assert biggest.arguments == {"path": str(EXAMPLES), "sortBy": "size"}
    # Not an order whose direction a sort by size may not give, nor two orders at once.
    orders = ("smallest first", "by name, biggest first", "from smallest to largest", "largest last")
    for query in (f"list the files with sizes, {order}" for order in orders):
        assert "sortBy" not in fill(sizes, analyse(task(query))).arguments, query


def test_a_boolean_said_in_other_words_and_a_number_by_what_it_counts() -> None:
    shot = example_catalog().find("browser", "browser_take_screenshot")
    wait = example_catalog().find("browser", "browser_wait_for")
    assert shot is not None and wait is not None
    assert fill(shot, analyse(task("a screenshot of the whole scrollable page"))).arguments["fullPage"] is True
    assert fill(shot, analyse(task("a screenshot without the full page"))).arguments["fullPage"] is False
    requests = example_catalog().find("browser", "browser_network_requests")
    assert requests is not None  # `static` is required, with a default of false: saying it is not the default
    said = {
        "the requests, including static resources": True,
        "the requests, static assets like images and scripts included": True,
        "the requests, no static ones": False,
        # from a review: each of these gave `static: true`, the opposite
        "the requests with static=false": False,
        "the requests, static: false": False,
        "the requests, hide static resources": False,
        "the requests, filter out static resources": False,
        "only non-static requests": False,
        "the requests that aren't static": False,
    }
    for query, static in said.items():
        assert fill(requests, analyse(task(query))).arguments["static"] is static, query
    for query in ("a screenshot, I don't need the full page", "a screenshot, fullPage false"):
        assert fill(shot, analyse(task(query))).arguments["fullPage"] is False, query
    assert fill(wait, analyse(task("pause the browser for 5 seconds so the page settles"))).arguments == {"time": 5}
    # What a number counts names its argument only when no word near it names one: "the first 5 lines" is `head`.
    read = example_catalog().find("filesystem", "read_text_file")
    assert read is not None
    assert fill(read, analyse(task("show the first 5 lines of notes.txt"))).arguments["head"] == 5
