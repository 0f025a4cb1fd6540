"""The HTTP service (`lineage serve`): the intake now, the read API later."""
