"""Where a test file's own lines are: for tests that check that an error points at the
user's source line (the kernel, the file and line, and the line's text)."""
import os


def line_starting_with(path: str, text: str) -> int:
    """The 1-based number of the only line of `path` whose stripped text starts with `text`."""
    with open(path) as source:
        numbers = [n for n, line in enumerate(source, 1) if line.strip().startswith(text)]
    assert len(numbers) == 1, \
        f"{text!r} should start exactly one line of {os.path.basename(path)}, found {numbers}"
    return numbers[0]


def assert_points_at(error, kernel_name: str, line_text: str, path: str) -> None:
    """The message names the kernel, file:line of the line starting with `line_text`, and
    that line's text."""
    message = str(error)
    assert kernel_name in message
    assert f"{os.path.basename(path)}:{line_starting_with(path, line_text)}" in message
    assert line_text in message
