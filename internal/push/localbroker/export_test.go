package localbroker

import "sync/atomic"

// Connected is how many clients the broker holds admitted. A client's
// count drops only after its will, if any, was handled.
func (b *Broker) Connected() int64 { return atomic.LoadInt64(&b.srv.Info.ClientsConnected) }
