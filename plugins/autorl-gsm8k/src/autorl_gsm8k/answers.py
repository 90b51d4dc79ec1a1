"""Answer extraction for GSM8K completions: the last stated answer ("The answer is N", "#### N",
``\\boxed{N}``), else the last number; fractions count as their value.

The reference is lm-evaluation-harness's ``gsm8k_cot`` task, whose prompt this benchmark uses: its
``strict-match`` filter takes the first ``The answer is (\\-?[0-9\\.\\,]+).``, its ``flexible-extract`` the
last ``(-?[$0-9.,]{2,})|(-?[0-9]+)``, both compared after removing ``,``, ``$`` and a trailing ``.``. This
extraction agrees with ``flexible-extract`` when no answer is stated and with the last ``strict-match``
when one is, except where that reference reads a number wrongly: a fraction (``1/2`` is 0.5, not 2),
``5.0`` against ``5`` (equal here), ``The answer is **7**`` or ``The answer is: 7`` (stated answers here).
"""

from __future__ import annotations

import re
from decimal import Decimal, DivisionByZero, InvalidOperation

# A minus sign only when it is attached to the number and not a binary minus after a word or a digit
# ("10-12" is two numbers; "5 -\n6" ends with 6); "$" and one space after it allowed; a fraction a/b.
_SCALAR = r"(?:\d[\d,]*(?:\.\d+)?|\.\d+)"
_NUMBER = rf"(?:(?<![\w).])-)?\$? ?{_SCALAR}(?:/{_SCALAR})?"
_STATED = re.compile(rf"answer is[:\s]*\**\s*({_NUMBER})|####\s*({_NUMBER})|\\boxed\{{\s*({_NUMBER})", re.IGNORECASE)
_ANY = re.compile(rf"(?<![\d,.]){_NUMBER}")
_HASHES = re.compile(rf"####\s*({_NUMBER})")


def normalize(text: str) -> Decimal | None:
    """A number as written ("1,234", "$5", "-3.50", "7.", "3/4") as a Decimal; None if it is not one."""
    cleaned = text.replace(",", "").replace("$", "").replace(" ", "").rstrip(".")
    try:
        if "/" in cleaned:
            num, _, den = cleaned.partition("/")
            return Decimal(num) / Decimal(den)
        return Decimal(cleaned)
    except (InvalidOperation, DivisionByZero, ZeroDivisionError):
        return None


def extract_answer(completion: str) -> Decimal | None:
    """The model's final answer: the last stated answer wins (a model that corrects itself means the
    correction), else the last number in the text."""
    stated = [next(g for g in m.groups() if g) for m in _STATED.finditer(completion)]
    if stated:
        return normalize(stated[-1])
    numbers = _ANY.findall(completion)
    return normalize(numbers[-1]) if numbers else None


def reference_answer(solution: str) -> Decimal | None:
    """The number after "####" in an official GSM8K solution."""
    match = _HASHES.search(solution)
    return normalize(match.group(1)) if match else None


def is_correct(completion: str, reference: str) -> bool:
    got, want = extract_answer(completion), normalize(reference)
    return got is not None and want is not None and got == want
