// Package kubedisco finds backends in the Kubernetes API with client-go
// informers, as backends.Discovery sources the pool opens through
// backends.Options.Open:
//
//	k8s://NAMESPACE/SERVICE:PORT      the Service's EndpointSlices; PORT is
//	                                  the port's name, or its number on the
//	                                  endpoints (the pods' port)
//	inferencepool://NAMESPACE/NAME    the pods an InferencePool
//	                                  (inference.networking.k8s.io/v1)
//	                                  selects, one backend per targetPort
//
// Either may carry the engine prefix of any backend spec
// (vllm+k8s://…). Ready endpoints become backends; one that is not ready
// or is terminating is dropped, so it takes no new requests while those
// in flight finish. A pod's engine label or annotation
// (prefixgate.io/engine: vllm, sglang or llamacpp) names its engine.
//
// The informers keep their last state while the API server is away, so
// routing goes on over the last known endpoints, and the watch resumes
// and catches up when it returns. Rules lists the RBAC rules discovery
// needs: list and watch of EndpointSlices, Pods and InferencePools in the
// namespace, and nothing else.
package kubedisco
