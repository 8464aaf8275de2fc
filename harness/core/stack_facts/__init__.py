"""The host's declaration of each stack (facts.py says what one holds), looked up by name."""

from __future__ import annotations

from harness.core.errors import HarnessError
from harness.core.stack_facts import stack_jax, stack_numpy, stack_pytorch
from harness.core.stack_facts.facts import FrameworkFacts, StackFacts
from harness.text.escape import plain

STACKS: dict[str, StackFacts] = {s.stack: s for s in (stack_jax.STACK, stack_numpy.STACK, stack_pytorch.STACK)}
FRAMEWORKS: dict[str, FrameworkFacts] = {name: f for s in STACKS.values() for name, f in s.frameworks.items()}


def of_stack(stack: str) -> StackFacts:
    """The stack's declaration; a stack without one is refused, never left unchecked."""
    if (facts := STACKS.get(stack)) is None:
        raise HarnessError(
            f"stack {plain(stack)!r} has no host declaration (its image checks, colours, version package): add "
            f"harness/core/stack_facts/stack_{stack}.py and list it in harness/core/stack_facts/__init__.py"
        )
    return facts
