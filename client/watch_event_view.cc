#include "client/watch_event_view.h"

#include "common/bounded_json_or_discarded.h"

namespace xv::client {

nlohmann::json WatchEventJson(const v1::WatchEvent& ev) {
  nlohmann::json j = {{"cursor", ev.cursor()},
                      {"time", ev.time()},
                      {"kind", ev.kind()},
                      {"campaign", ev.campaign()},
                      {"campaign_id", ev.campaign_id()},
                      {"round_id", ev.round_id()},
                      {"experiment_id", ev.experiment_id()},
                      {"attempt", ev.attempt()},
                      {"name", ev.name()}};
  if (!ev.state().empty()) j["state"] = ev.state();
  if (!ev.detail().empty()) j["detail"] = ev.detail();
  if (ev.kind() == "dropped") j["dropped"] = ev.dropped();
  if (ev.kind() == "step" || ev.kind() == "eval" || ev.kind() == "nan") j["step"] = ev.step();
  if (ev.kind() == "step") {
    j["loss"] = ev.loss();
    j["tok_per_sec"] = ev.tok_per_sec();
  }
  if (ev.kind() == "summary" || ev.kind() == "eval") j["val_bpb"] = ev.val_bpb();
  nlohmann::json event = ParseBoundedJsonOrDiscarded(ev.json());
  if (!event.is_discarded() && !ev.json().empty()) j["event"] = event;
  return j;
}

}  // namespace xv::client
