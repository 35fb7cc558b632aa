"""Documentation rendered from the code: rule pages, the op-table page, the runtime evidence."""
