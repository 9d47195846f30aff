"""policies/loader.py and policies/locate.py: TOML -> frozen Policy, or every problem at once."""

from __future__ import annotations

from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from policies.loader import PolicyError, Problem, load_policy, parse_policy
from policies.locate import locate
from policies.model import Backend, Policy, Server, Timeouts
from tests.policy_texts import BACKEND, problems_of

# (text, key path, line, message fragment); every text has exactly one problem.
INVALID = {
    "unknown top-level key": ("caching = true\n" + BACKEND, "caching", 1, "unknown section"),
    "unknown key in server": ("[server]\nprot = 1\n" + BACKEND, "server.prot", 2, "unknown key"),
    "unknown key in timeouts": (
        "[timeouts]\nconect_s = 1\n" + BACKEND,
        "timeouts.conect_s",
        2,
        "expected one of connect_s, first_byte_s, idle_s, total_s",
    ),
    "unknown key in backend": (BACKEND + 'modle = "x"\n', "backends[0].modle", 5, "unknown key"),
    "string for int": ('[server]\nport = "80"\n' + BACKEND, "server.port", 2, "got '80'"),
    "bool for int": ("[server]\nport = true\n" + BACKEND, "server.port", 2, "got True"),
    "float for int port": (
        "[server]\nport = 80.0\n" + BACKEND,
        "server.port",
        2,
        "expected an integer, got 80.0",
    ),
    "string for seconds": (
        '\n[timeouts]\nconnect_s = "2"\n' + BACKEND,
        "timeouts.connect_s",
        3,
        "expected a number of seconds",
    ),
    "bool for seconds": (
        "[timeouts]\ntotal_s = false\n" + BACKEND,
        "timeouts.total_s",
        2,
        "got False",
    ),
    "port out of range": (
        "[server]\nport = 70000\n" + BACKEND,
        "server.port",
        2,
        "must be a port number (0-65535), got 70000",
    ),
    "negative timeout": (
        "[timeouts]\nconnect_s = -1\n" + BACKEND,
        "timeouts.connect_s",
        2,
        "must be greater than 0, got -1",
    ),
    "zero timeout": (
        "[timeouts]\nfirst_byte_s = 1\nidle_s = 0.0\n" + BACKEND,
        "timeouts.idle_s",
        3,
        "must be greater than 0",
    ),
    "zero max_body_bytes": (
        "[server]\nhost = 'x'\nmax_body_bytes = 0\n" + BACKEND,
        "server.max_body_bytes",
        3,
        "must be greater than 0, got 0",
    ),
    "zero max_concurrency": (
        BACKEND + "max_concurrency = 0\n",
        "backends[0].max_concurrency",
        5,
        "must be greater than 0",
    ),
    "bad log level": (
        "[server]\nlog_level = 'loud'\n" + BACKEND,
        "server.log_level",
        2,
        "must be one of debug, info, warning, error",
    ),
    "server not a table": ("server = 3\n" + BACKEND, "server", 1, "must be a table"),
    "bad backend kind": (
        '[[backends]]\nname = "a"\nkind = "tgi"\nurl = "http://h:1"\n',
        "backends[0].kind",
        3,
        "must be one of vllm, ollama, openai, got 'tgi'",
    ),
    "bad url scheme": (
        '[[backends]]\nname = "a"\nkind = "vllm"\nurl = "ftp://h:1"\n',
        "backends[0].url",
        4,
        "must be an http:// or https:// URL",
    ),
    "url without host": (
        '[[backends]]\nname = "a"\nkind = "vllm"\nurl = "http://"\n',
        "backends[0].url",
        4,
        "http:// or https://",
    ),
    "bad backend name characters": (
        '[[backends]]\nname = "gpu box"\nkind = "vllm"\nurl = "http://h:1"\n',
        "backends[0].name",
        2,
        "must be letters, digits",
    ),
    "backend name starting with a dash": (
        '[[backends]]\nname = "-a"\nkind = "vllm"\nurl = "http://h:1"\n',
        "backends[0].name",
        2,
        "got '-a'",
    ),
    "duplicate backend names": (
        BACKEND + "\n" + BACKEND,
        "backends[1].name",
        7,
        "duplicate backend name 'a'",
    ),
    "missing backend url": (
        '\n[[backends]]\nname = "a"\nkind = "vllm"\n',
        "backends[0].url",
        2,  # absent key: the line of its table
        "is required (a string)",
    ),
    "missing backend kind in second entry": (
        BACKEND + '\n[[backends]]\nname = "b"\nurl = "http://h:2"\n',
        "backends[1].kind",
        6,
        "is required",
    ),
    "models list with a non-string": (
        BACKEND + 'models = ["m", 3]\n',
        "backends[0].models",
        5,
        "every entry must be a non-empty model name",
    ),
    "models list with an empty name": (
        BACKEND + 'models = ["m", ""]\n',
        "backends[0].models",
        5,
        "non-empty model name",
    ),
    "models table with a non-string value": (
        BACKEND + "models = { m = 3 }\n",
        "backends[0].models",
        5,
        "every value must be the engine's model name",
    ),
    "models neither list nor table": (
        BACKEND + 'models = "m"\n',
        "backends[0].models",
        5,
        "expected a list of names or a table",
    ),
    "no backends at all": (
        "[server]\nport = 1\n",
        "backends",
        None,
        "at least one [[backends]] entry is required",
    ),
    "backends a string": (
        'backends = "a"\n',
        "backends",
        1,
        "must be an array of tables ([[backends]])",
    ),
    "backends an array of strings": (
        'backends = ["a", "b"]\n',
        "backends",
        1,
        "must be an array of tables",
    ),
    "invalid TOML": ("[server]\nport = \n" + BACKEND, "", 2, "not valid TOML"),
}


@pytest.mark.parametrize(("text", "key", "line", "fragment"), INVALID.values(), ids=INVALID.keys())
def test_invalid_file_reports_key_line_and_message(
    text: str, key: str, line: int | None, fragment: str
) -> None:
    [problem] = problems_of(text)
    assert (problem.key, problem.line) == (key, line)
    assert fragment in problem.message


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        (BACKEND + "\n[caching]\nsize = 1\n", "caching", 6),
        ('[backends]\nname = "a"\n', "backends", 1),
    ],
    ids=["unknown [section]", "single [backends] table"],
)
def test_problem_with_a_whole_table_is_located_at_its_header(
    text: str, key: str, line: int
) -> None:
    [problem] = problems_of(text)
    assert (problem.key, problem.line) == (key, line)


def test_models_written_as_a_sub_table_is_located_at_the_sub_table() -> None:
    [problem] = problems_of(BACKEND + "[backends.models]\nm = 3\n")
    assert (problem.key, problem.line) == ("backends[0].models", 5)


def test_several_problems_are_reported_at_once() -> None:
    text = (
        "[server]\nport = 70000\nhost = 1\n\n"  # lines 1-4
        "[timeouts]\ntotal_s = 0\nspeed = 2\n\n"  # lines 5-8
        + BACKEND  # lines 9-12
        + "\n[[backends]]\nname = 'a'\nkind = 'tgi'\nurl = 'http://z'\n"  # lines 13-17
    )
    found = sorted((p.key, p.line) for p in problems_of(text))
    assert found == [
        ("backends[1].kind", 16),
        ("backends[1].name", 15),
        ("server.host", 3),
        ("server.port", 2),
        ("timeouts.speed", 7),
        ("timeouts.total_s", 6),
    ]


def test_two_backends_without_names_are_not_called_duplicates() -> None:
    nameless = '[[backends]]\nkind = "vllm"\nurl = "http://h:1"\n'
    found = [(p.key, p.message) for p in problems_of(nameless + nameless)]
    assert found == [
        ("backends[0].name", "is required (a string)"),
        ("backends[1].name", "is required (a string)"),
    ]


def test_error_message_lists_every_problem_line() -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy("[server]\nport = -1\n[timeouts]\nidle_s = 0\n" + BACKEND, "p.toml")
    assert str(caught.value).splitlines() == [
        "p.toml:2: server.port: must be a port number (0-65535), got -1",
        "p.toml:4: timeouts.idle_s: must be greater than 0, got 0",
    ]


FULL = """
[server]
host = "0.0.0.0"
port = 9000
max_body_bytes = 1024
probe_interval_s = 2
log_level = "debug"

[timeouts]
connect_s = 1
first_byte_s = 2.5
idle_s = 3
total_s = 40

[[backends]]
name = "gpu-1"
kind = "vllm"
url = "http://10.0.0.1:8000/"
models = ["llama", "qwen"]
max_concurrency = 8

[[backends]]
name = "mac.mini_2"
kind = "ollama"
url = "https://ollama.local:11434/v1//"
models = { llama = "llama3.1:8b" }
api_key_env = "OLLAMA_KEY"
"""


def test_valid_file_parses_into_the_expected_policy() -> None:
    assert parse_policy(FULL, "full.toml") == Policy(
        server=Server("0.0.0.0", 9000, 1024, 2.0, "debug"),
        timeouts=Timeouts(1.0, 2.5, 3.0, 40.0),
        backends=(
            Backend("gpu-1", "vllm", "http://10.0.0.1:8000", {"llama": "llama", "qwen": "qwen"}, 8),
            Backend(
                "mac.mini_2",
                "ollama",
                "https://ollama.local:11434/v1",
                {"llama": "llama3.1:8b"},
                api_key_env="OLLAMA_KEY",
            ),
        ),
        source="full.toml",
    )


def test_integer_seconds_become_floats() -> None:
    policy = parse_policy(FULL)
    seconds = [policy.server.probe_interval_s, policy.timeouts.connect_s, policy.timeouts.total_s]
    assert [type(value) for value in seconds] == [float, float, float]


def test_integer_settings_stay_integers() -> None:
    policy = parse_policy(FULL)
    assert type(policy.server.port) is int
    assert type(policy.backends[0].max_concurrency) is int


def test_minimal_file_gets_the_defaults() -> None:
    policy = parse_policy(BACKEND)
    assert policy.server == Server(
        host="127.0.0.1", port=8080, max_body_bytes=4 * 1024 * 1024, probe_interval_s=1.0
    )
    assert policy.timeouts == Timeouts(connect_s=2.0, first_byte_s=60.0, idle_s=60.0, total_s=600.0)
    assert policy.backends == (Backend("a", "vllm", "http://h:1"),)
    assert policy.source == "<policy>"


def test_backend_without_models_discovers_them() -> None:
    backend = parse_policy(BACKEND).backends[0]
    assert backend.models is None
    assert backend.discovers_models is True


def test_backend_with_models_does_not_discover() -> None:
    backend = parse_policy(BACKEND + 'models = ["m"]\n').backends[0]
    assert backend.discovers_models is False


def test_parsed_policy_is_frozen() -> None:
    policy = parse_policy(FULL)
    with pytest.raises(FrozenInstanceError):
        policy.server.port = 1  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        policy.backends[0].url = "http://elsewhere"  # type: ignore[misc]
    assert isinstance(policy.backends, tuple)


def test_policy_backend_looks_up_by_name() -> None:
    assert parse_policy(FULL).backend("mac.mini_2").kind == "ollama"


def test_load_policy_reads_the_file_and_records_its_path(tmp_path: Path) -> None:
    path = tmp_path / "overspill.toml"
    path.write_text(BACKEND)
    policy = load_policy(path)
    assert policy.source == str(path)
    assert policy.backends[0].name == "a"


def test_load_policy_reports_problems_against_the_file_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[server]\nport = 70000\n" + BACKEND)
    with pytest.raises(PolicyError) as caught:
        load_policy(path)
    assert caught.value.report().startswith(f"{path}:2: server.port: ")


def test_load_policy_on_a_missing_file_says_it_cannot_read_it(tmp_path: Path) -> None:
    path = tmp_path / "missing.toml"
    with pytest.raises(PolicyError) as caught:
        load_policy(path)
    assert caught.value.source == str(path)
    assert caught.value.report() == f"{path}:?: cannot read: No such file or directory"


def test_report_formats_source_line_key_and_message() -> None:
    error = PolicyError(
        "conf.toml",
        [
            Problem("server.port", "must be a port number", 3),
            Problem("backends", "at least one entry", None),
            Problem("", "not valid TOML", 7),
        ],
    )
    assert error.report() == (
        "conf.toml:3: server.port: must be a port number\n"
        "conf.toml:?: backends: at least one entry\n"
        "conf.toml:7: not valid TOML"
    )
    assert str(error) == error.report()


LOCATE_TEXT = """\
# top comment
caching = 1

[ "server" ]  # the listener
"port" = 8080
port_extra = 1
host = "0.0.0.0"

[[backends]]   # first
name = "a"

[["backends"]]
name = "b"
url = "http://b"

[[backends]]
# url = "http://commented-out"
url_extra = 1
url = "http://c"
[timeouts]
idle_s = 1
"""


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ("caching", 2),
        ("server.port", 5),  # quoted key, header with spaces, quotes and a comment
        ("server.host", 7),
        ("backends[0].name", 10),  # header followed by a comment
        ("backends[1].name", 13),  # quoted array-of-tables header
        ("backends[1].url", 14),
        ("backends[2].url", 19),  # neither the commented-out nor the longer key
        ("timeouts.idle_s", 21),
    ],
)
def test_locate_finds_the_line_of_a_written_key(path: str, line: int) -> None:
    assert locate(LOCATE_TEXT, path) == line


@pytest.mark.parametrize(
    ("path", "line"),
    [
        ("server.max_body_bytes", 4),
        ("backends[0].url", 9),  # not backends[1]'s url, written after the next header
        ("backends[2].kind", 16),
    ],
)
def test_locate_returns_the_table_line_for_an_absent_key(path: str, line: int) -> None:
    assert locate(LOCATE_TEXT, path) == line


@pytest.mark.parametrize("path", ["absent", "logging.level", "backends[3].url", "server.a.b"])
def test_locate_returns_none_without_a_table_to_point_at(path: str) -> None:
    assert locate(LOCATE_TEXT, path) is None


def test_locate_does_not_take_a_key_from_the_next_table() -> None:
    text = '[server]\nhost = "h"\n[timeouts]\nport = 1\n'
    assert locate(text, "server.port") == 1


def test_locate_an_array_of_tables_entry_gives_its_header_line() -> None:
    assert locate(LOCATE_TEXT, "backends[1]") == 12
