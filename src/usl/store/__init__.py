from usl.store.db import Store

__all__ = ["Store"]
