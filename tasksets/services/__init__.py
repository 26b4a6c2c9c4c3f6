"""Task set services: the only code that writes task sets and their element links."""
