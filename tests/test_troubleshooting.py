"""Every example of the troubleshooting page (docs/troubleshooting.md) raises the error it
names, with the message the page quotes in it."""

import re
import runpy
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "troubleshooting.md"
EXAMPLE = re.compile(
    r"```python\n(?P<code>.*?)```\s*\n\s*raises `(?P<error>\w+)`: `(?P<message>[^`]+)`",
    re.DOTALL,
)
EXAMPLES = [m.groupdict() for m in EXAMPLE.finditer(PAGE.read_text())]


def test_the_page_has_examples():
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize("example", EXAMPLES, ids=[e["message"][:40] for e in EXAMPLES])
def test_each_example_raises_what_the_page_says(example, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "example.py"
    script.write_text(example["code"])
    with pytest.raises(Exception) as raised:
        runpy.run_path(str(script))
    assert type(raised.value).__name__ == example["error"]
    assert example["message"] in str(raised.value), str(raised.value)[:300]
