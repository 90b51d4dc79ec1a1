"""Answer extraction for GSM8K completions: "The answer is N", "#### N", else the last number."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_NUMBER = r"-?\$?\s*\d[\d,]*(?:\.\d+)?|-?\$?\s*\.\d+"
_ANSWER_IS = re.compile(rf"answer is[:\s]*\**\s*({_NUMBER})", re.IGNORECASE)
_HASHES = re.compile(rf"####\s*({_NUMBER})")
_BOXED = re.compile(rf"\\boxed\{{\s*({_NUMBER})")
_ANY = re.compile(_NUMBER)


def normalize(text: str) -> Decimal | None:
    """A number as written ("1,234", "$5", "-3.50", "7.") as a Decimal; None if it is not one."""
    cleaned = text.replace(",", "").replace("$", "").replace(" ", "").rstrip(".")
    try:
        return Decimal(cleaned)
    except InvalidOperation:
        return None


def extract_answer(completion: str) -> Decimal | None:
    """The model's final answer: the first explicit marker wins, else the last number in the text."""
    for pattern in (_ANSWER_IS, _HASHES, _BOXED):
        match = pattern.search(completion)
        if match:
            return normalize(match.group(1))
    numbers = _ANY.findall(completion)
    return normalize(numbers[-1]) if numbers else None


def reference_answer(solution: str) -> Decimal | None:
    """The number after "####" in an official GSM8K solution."""
    match = _HASHES.search(solution)
    return normalize(match.group(1)) if match else None


def is_correct(completion: str, reference: str) -> bool:
    got, want = extract_answer(completion), normalize(reference)
    return got is not None and want is not None and got == want
