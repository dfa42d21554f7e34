"""`agentify eval`: the planners' routing accuracy (`routing`) and `search_tools` recall (`search`)."""
