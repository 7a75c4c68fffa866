package kubectlplugin

import "encoding/json"

// annotationPatch is a merge patch that sets key to value (removes it when
// value is nil) on the node of uid: the UID makes it fail rather than touch
// a node re-created under the same name since it was read.
func annotationPatch(uid, key string, value *string) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         uid,
		"annotations": map[string]*string{key: value},
	}})
}
