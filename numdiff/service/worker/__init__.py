"""The analysis workers: the persisted job queue, the worker processes that claim its jobs, and the
limited runner processes (``child``) that run each stage (``python -m numdiff.service.worker`` starts one worker).
"""
