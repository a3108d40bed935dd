"""The main window's parts: ``chrome`` (docks, actions, toolbar, menus, banner, status bar),
``sessions`` (create, open, switch and close a session) and ``run_control`` (start, pause, stop,
budget, the engine's feedback). ``gui/main_window.py`` puts them together."""
