package fleet

// Crash stops k as a process that dies would: no release, no last word to
// the supervisor. Calls in flight end by themselves; Crash waits for them.
func Crash(k *Keeper) {
	k.stopOnce.Do(func() {
		k.stopping.Store(true)
		if k.sub != nil {
			k.sys.EventStream.Unsubscribe(k.sub)
		}
		close(k.stopTick)
		k.sys.Root.Stop(k.pid)
	})
	k.workers.Wait()
	<-k.done
}
