"""A message pattern: the literal pieces of a message, with a wildcard wherever a value is
formatted in (an f-string hole, a `%s`, a `{}`), matched without regular expressions.

In the data file a pattern is one string whose wildcards are written `{*}`. Matching looks for
each literal piece in order, each after the previous one (leftmost first): one pass over the line
per piece, so a line is matched in time linear in its length, whatever the pattern.
"""

from dataclasses import dataclass

WILD = "{*}"
ANCHOR_MIN = 10  # the longest piece must be this long for a pattern to be matched at all


@dataclass(frozen=True, slots=True)
class Pattern:
    """A message's literal pieces, in order (wildcards between them and at both ends)."""

    pieces: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> "Pattern":
        """A pattern from its data-file form (`{*}` for each wildcard)."""
        return cls(tuple(piece.strip() for piece in text.split(WILD) if piece.strip()))

    @property
    def anchor(self) -> str:
        """The longest literal piece: what an index looks for first."""
        return max(self.pieces, key=len, default="")

    @property
    def literal_chars(self) -> int:
        """How much literal text the pattern holds (a longer match is a more specific one)."""
        return sum(len(piece) for piece in self.pieces)

    def matches(self, line: str) -> bool:
        """True when every piece occurs in `line`, in order, without overlapping."""
        at = 0
        for piece in self.pieces:
            found = line.find(piece, at)
            if found < 0:
                return False
            at = found + len(piece)
        return bool(self.pieces)
