"""The production JobStore: MongoDB through pymongo, every call in a trio worker thread."""

from .store import MongoJobStore as MongoJobStore
