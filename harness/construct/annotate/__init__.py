"""The annotation tool: a small local web app where annotators rank each item's candidate
clips, with every ranking stored in SQLite as it is submitted, and an export of them into
the dataset's `annotations` for stage 4 of the build."""
