def main() -> int:
    raise NotImplementedError
