"""Kafka's JAAS configuration text (``sasl.jaas.config``), as its JaasConfig parses it.

    org.apache.kafka.common.security.plain.PlainLoginModule required
        user_admin="admin-secret" user_alice="alice-secret";

One or more login modules, each ``<class> <flag> [name=value ...];``. A value is a quoted
string (``\\`` escapes the next character) or a bare word; names are bare words. Kafka reads it
with Java's StreamTokenizer, whose quirks (comments, numbers) no real configuration relies on;
anything else here is refused with the position of the fault.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c in "._-$/:@*+"


class _Tokens:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def _skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str | None:
        self._skip_space()
        return self.text[self.pos] if self.pos < len(self.text) else None

    def error(self, what: str) -> JaasConfigError:
        return JaasConfigError(f"invalid JAAS configuration at character {self.pos}: {what}")

    def word(self, what: str) -> str:
        self._skip_space()
        start = self.pos
        while self.pos < len(self.text) and _is_word_char(self.text[self.pos]):
            self.pos += 1
        if start == self.pos:
            raise self.error(f"expected {what}")
        return self.text[start : self.pos]

    def value(self) -> str:
        c = self.peek()
        if c != '"':
            return self.word("an option value")
        self.pos += 1
        out: list[str] = []
        while self.pos < len(self.text):
            c = self.text[self.pos]
            self.pos += 1
            if c == '"':
                return "".join(out)
            if c == "\\":
                if self.pos >= len(self.text):
                    break
                c = self.text[self.pos]
                self.pos += 1
            out.append(c)
        raise self.error("unterminated quoted value")

    def expect(self, c: str) -> None:
        if self.peek() != c:
            raise self.error(f"expected {c!r}")
        self.pos += 1


def parse_jaas_config(text: str) -> list[LoginModule]:
    """The login modules of a ``sasl.jaas.config`` value; at least one, each ending with ';'."""
    tokens = _Tokens(text)
    modules = []
    while tokens.peek() is not None:
        class_name = tokens.word("a login module class name")
        flag = tokens.word("a control flag").lower()
        if flag not in FLAGS:
            raise tokens.error(f"control flag {flag!r} is not one of {', '.join(FLAGS)}")
        options: dict[str, str] = {}
        while tokens.peek() not in (";", None):
            name = tokens.word("an option name")
            tokens.expect("=")
            if name in options:
                raise tokens.error(f"option {name!r} given twice")
            options[name] = tokens.value()
        tokens.expect(";")
        modules.append(LoginModule(class_name, flag, options))
    if not modules:
        raise JaasConfigError("JAAS configuration has no login module")
    return modules
