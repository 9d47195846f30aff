"""Real inference engines Overspill can set up and run locally (`overspill engine ...`)."""
