"""Answer extraction on completions the way models really write them."""

from __future__ import annotations

from decimal import Decimal

import pytest
from autorl_gsm8k.answers import extract_answer, is_correct, reference_answer


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        (" Natalia sold 48/2 = 24 clips in May. 48 + 24 = 72. The answer is 72.", "72"),
        (" She pays 3 * $1,200 = $3,600. The answer is $3,600.", "3600"),
        (" The temperature dropped by 5 degrees. The answer is -5.", "-5"),
        (" Each costs 2.50, so 4 cost 10.00. The answer is 10.00 dollars.", "10"),
        (" 16 - 3 - 4 = 9 eggs, 9 * 2 = 18.\n#### 18", "18"),
        (" So the total is \\boxed{42}.", "42"),
        (" First 12 + 5 = 17, then 17 * 3 = 51 apples", "51"),
        (" The answer is: 0.5", "0.5"),
        (" The answer is **7**.", "7"),
        (" He walked 3 miles on Monday and 4 miles on Tuesday. The answer is 7 miles. Q: next", "7"),
    ],
)
def test_extracts_the_final_number(completion: str, expected: str) -> None:
    assert extract_answer(completion) == Decimal(expected)


def test_no_number_is_no_answer() -> None:
    assert extract_answer(" I am not sure.") is None
    assert not is_correct(" I am not sure.", "5")


def test_reference_and_equivalent_forms() -> None:
    solution = "Weng earns 12/60 = $0.2 per minute.\nWorking 50 minutes, she earned 0.2 x 50 = $10.\n#### 10"
    assert reference_answer(solution) == Decimal("10")
    assert is_correct(" The answer is 10.0", "10")
    assert is_correct(" The answer is 1,000.", "1000")
    assert not is_correct(" The answer is 11.", "10")
    # an explicit answer wins over later numbers
    assert is_correct(" The answer is 10. (Check: 5 + 5 = 10, 3 extra)", "10")
