package kubectlplugin

import "encoding/json"

// annotationPatch is a merge patch that sets each of keys to value (removes
// them when value is nil) on the node of uid: the UID makes it fail rather
// than touch a node re-created under the same name since it was read.
func annotationPatch(uid string, keys []string, value *string) ([]byte, error) {
	annotations := map[string]*string{}
	for _, k := range keys {
		annotations[k] = value
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         uid,
		"annotations": annotations,
	}})
}
