"""The request path under one policy, one way from the edge to the legs: who asks (caller,
gate), the cache and coalescing, the plan and its waiting room, the chain of targets with its
retries and degrade, and the typed record of what happened. Change how a request is routed here;
what overflow is decided on lives in policies/ (pure), which this room calls."""
