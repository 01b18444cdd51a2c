#include "simdev/device/model/calbin_image.hpp"

namespace simdev {

std::optional<size_t> CalbinImage::find_model(std::string_view name) const {
  for (size_t i = 0; i < manifest.models.size(); ++i) {
    if (manifest.models[i].name == name) {  // exact: never a prefix or substring match
      return i;
    }
  }
  return std::nullopt;
}

std::string CalbinImage::not_found_message(std::string_view name) const {
  std::string list;
  for (const auto& model : manifest.models) {
    list += (list.empty() ? "" : ", ") + model.name;
  }
  return "model \"" + std::string(name) + "\" not found in calbin #" + std::to_string(serial) +
         "; models: " + list;
}

}  // namespace simdev
