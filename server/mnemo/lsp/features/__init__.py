"""Language server features, one per file; `mnemo.lsp.server` registers each LSP method once and fans out."""
