"""Claims about mixed precision grouped by topic; claims.py joins them into CLAIMS."""
