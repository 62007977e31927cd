"""Views: Report objects built from engine results, shared by commands and worked answers.

A view turns one engine result into sections, headlines and tables (no printing: the report room
renders them). Commands and question modules both import views; views import engines and the
result types, never commands.
"""
