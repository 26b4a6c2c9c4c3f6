"""Task sets: many single tasks as one object (docs/sets.md)."""
