"""Front end for agents: the MCP server over stdio and HTTP, and installing it into clients."""
