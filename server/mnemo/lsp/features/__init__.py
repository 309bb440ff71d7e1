"""Language server features, one per module, each a `mnemo.lsp.feature.LanguageFeature`; `mnemo.lsp.server` lists
them (`FEATURES`) and `mnemo.lsp.setup` registers each LSP method once and fans it out to them."""
