"""The live implementations of the engine's ports (tma1.engine.ports), over the store and
the data dir: `windows.StoreWindows` (WindowSource), `emitlog.EmitLog` (EmitSink),
`mutes.Mutes` (MuteSource), and `engine.stored_delivery`, which wires them into a
`Delivery`. The store itself answers the bundle's reads (BundleReads); `tma1.ingest.Ingest`
is the live EventSink. Their replay peers are in `tma1.replay.memory`: replay differs from
live only by which of them it passes in (design §5)."""
