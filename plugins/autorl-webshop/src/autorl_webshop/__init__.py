"""The WebShop benchmark plugin for autorl: environment, reward, search and catalog of its own."""
