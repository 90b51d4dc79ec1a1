"""Built-in plugins: they register through the same hooks as any third-party plugin."""
