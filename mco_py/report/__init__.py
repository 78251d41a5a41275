"""The report as a document: what an entry looks like, how the report is built from the
scorer's assessments, and how it is kept under the API server's size limit. Pure: no I/O.

Layered between the adapters (stores, extender) and the analysis: it reads assessments,
never scores.
"""
