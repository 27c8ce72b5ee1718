"""The model of one Plan on one GPU: numpy executor, L2-aware memory, occupancy, timing."""
