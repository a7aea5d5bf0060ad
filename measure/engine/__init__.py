"""The transfer engine: data path, buffers, DRS, steady state, attach, transfers, rates."""
