"""What a text or a name in a request (or a bank file) must be: visible, and names short.

Here, below the API, so that the request schemas and the bank reader refuse exactly the same texts.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints

#: At least one visible character: not white space, a control character (C0, C1, NUL), a
#: zero-width or other format character (soft hyphen, ZWSP/ZWJ/ZWNJ, direction marks, word
#: joiner, BOM...). Patterns search, they do not anchor. Written as explicit code-point ranges,
#: not ``\s``, because JSON Schema validators (ECMAScript), Python and pydantic's Rust engine each
#: define ``\s`` differently (U+0085 is space to Python and Rust, not to ECMAScript): with explicit
#: ranges the published schema and the server reject exactly the same texts.
NON_BLANK = (
    r"[^\u0000-\u0020\u007f-\u00a0\u00ad\u034f\u061c\u115f\u1160\u1680\u180e"
    r"\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb]"
)
#: An id, generator, action, intent or model name.
Name = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=NON_BLANK)]
