"""matplotlib for our plots (aggregate's learning curves, the T5-bias figure, the main job's curve), set up once."""


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend, with matplotlib's own logger at WARNING: importing fairseq
    sets the root logger to DEBUG, and matplotlib then prints hundreds of font-search lines."""
    import logging

    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
