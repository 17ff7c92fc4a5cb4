import pytest

from controller import config


def test_defaults_without_a_file(monkeypatch):
    monkeypatch.delenv("MLROUTE_CONFIG", raising=False)
    cfg = config.load()
    assert cfg["rest"]["host"] == "127.0.0.1" and cfg["te"]["mode"] == "mlroute"


def test_file_overrides_only_what_it_names(tmp_path, monkeypatch):
    path = tmp_path / "c.yaml"
    path.write_text("te:\n  mode: greedy\n  poll_interval_s: 0.5\ntiers:\n  0x10: core\n")
    monkeypatch.setenv("MLROUTE_CONFIG", str(path))
    cfg = config.load()
    assert cfg["te"]["mode"] == "greedy" and cfg["te"]["poll_interval_s"] == 0.5
    assert cfg["te"]["elephant_polls"] == config.DEFAULTS["te"]["elephant_polls"]
    assert cfg["tiers"] == {16: "core"}


@pytest.mark.parametrize("text, expected", [
    ("te:\n  mode: fastest\n", "c.yaml:2: te.mode: must be one of"),
    ("te:\n  poll_interval_s: -1\n", "c.yaml:2: te.poll_interval_s: must be > 0"),
    ("te:\n  poll_interval_s: soon\n", "c.yaml:2: te.poll_interval_s: must be int or float"),
    ("te:\n  hysteresis: 1\n", "c.yaml:2: te.hysteresis: must be bool"),
    ("rest:\n  host: 127.0.0.1\n  prot: 80\n", "c.yaml:3: rest.prot: unknown key"),
    ("routing:\n  x: 1\n", "c.yaml:1: routing: unknown section"),
    ("te: [1, 2\n", "c.yaml:2: not valid YAML"),
    ("jobs:\n  - name: a\n", "c.yaml:1: jobs[0]: needs name"),
])
def test_errors_name_the_line_and_the_key(text, expected):
    with pytest.raises(config.ConfigError) as err:
        config.parse(text, "c.yaml")
    assert str(err.value).startswith(expected)


def test_unreadable_file_is_a_clear_error(tmp_path):
    with pytest.raises(config.ConfigError, match="cannot read"):
        config.load(str(tmp_path / "missing.yaml"))


def test_the_example_file_documents_every_default():
    from pathlib import Path
    example = Path(__file__).resolve().parents[3] / "examples" / "mlroute.yaml"
    text = example.read_text()
    assert config.load(str(example)) == config.DEFAULTS
    for section in ("rest", "te"):
        for key in config.DEFAULTS[section]:
            assert f"  {key}:" in text, f"{section}.{key} missing from examples/mlroute.yaml"
