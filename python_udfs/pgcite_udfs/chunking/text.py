"""Plain text: windows of the token budget that overlap."""

from __future__ import annotations

from collections.abc import Callable

from .checkpoint import Ticker
from .errors import MAX_DOCUMENT_BYTES, check_size
from .result import Chunk, ParseResult
from .sections import content_budget
from .split import WORD_RE, split_chars
from .tokens import Counter


def chunk_text(
    text: str,
    max_tokens: int = 256,
    overlap: int = 32,
    count_tokens=None,
    *,
    max_bytes: int = MAX_DOCUMENT_BYTES,
    checkpoint: Callable[[], object] | None = None,
) -> ParseResult:
    """Token windows of the content budget with ``overlap`` tokens of overlap, broken at whitespace.

    At most ``max_bytes`` bytes of UTF-8 (InputError 54000 beyond). ``checkpoint`` is called now and then
    (every few hundred token counts); what it raises stops the work.
    """
    check_size(text, max_bytes)
    count = Counter(count_tokens, Ticker(checkpoint))
    result = ParseResult(format="text")
    budget = content_budget(max_tokens, "", count)
    overlap = max(0, min(overlap, budget // 2))
    words: list[tuple[int, int]] = []
    costs: list[int] = []
    for m in WORD_RE.finditer(text):
        words.append(m.span())
        costs.append(count(m.group()))
    if not words:
        return result
    result.sections_found = 1
    contents: list[str] = []
    n = len(words)
    i = 0
    while i < n:
        if costs[i] > budget:
            contents.extend(split_chars(text[words[i][0] : words[i][1]], budget, count))
            i += 1
            continue
        j = i
        cost = 0
        while j < n and cost + costs[j] <= budget:
            cost += costs[j]
            j += 1
        piece = text[words[i][0] : words[j - 1][1]]
        while j - 1 > i and count(piece) > budget:  # non-additive counter
            j -= 1
            piece = text[words[i][0] : words[j - 1][1]]
        contents.append(piece)
        if j >= n:
            break
        k = j
        ov = 0
        while k - 1 > i and ov + costs[k - 1] <= overlap:
            k -= 1
            ov += costs[k]
        i = k
    result.chunks = [Chunk(idx, None, "", "", c, count(c)) for idx, c in enumerate(contents)]
    return result
