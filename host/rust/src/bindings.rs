//! The host's WIT bindings: the one `bindgen!` of world `kernel`, async on
//! both sides (a store call awaits its binding, see `engine`). `convert`
//! maps their types to the rules' types; `engine` implements the imports.
wasmtime::component::bindgen!({
    path: "wit",
    world: "kernel",
    imports: { default: async },
    exports: { default: async },
});
