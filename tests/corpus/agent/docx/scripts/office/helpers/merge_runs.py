"""Merge adjacent runs with the same formatting in a document's XML (a module of office/)."""


def merge_runs(paragraph):
    runs = list(paragraph)
    return runs
