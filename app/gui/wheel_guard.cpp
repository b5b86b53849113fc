#include "app/gui/wheel_guard.h"

#include <QAbstractSlider>
#include <QAbstractSpinBox>
#include <QApplication>
#include <QComboBox>
#include <QEvent>
#include <QScrollBar>

namespace attn::gui {

namespace {

bool guarded(const QObject* obj) {
  if (qobject_cast<const QScrollBar*>(obj)) return false;  // a scroll bar is for scrolling
  return qobject_cast<const QComboBox*>(obj) || qobject_cast<const QAbstractSpinBox*>(obj) ||
         qobject_cast<const QAbstractSlider*>(obj);
}

class WheelGuard final : public QObject {
 public:
  using QObject::QObject;

 protected:
  bool eventFilter(QObject* obj, QEvent* e) override {
    if (e->type() == QEvent::Polish && guarded(obj)) {
      // Qt::WheelFocus (a combo box's default) would hand the widget focus on the first wheel
      // step, and that step would change it.
      auto* w = static_cast<QWidget*>(obj);
      if (w->focusPolicy() == Qt::WheelFocus) w->setFocusPolicy(Qt::StrongFocus);
      return false;
    }
    if (e->type() != QEvent::Wheel || !guarded(obj)) return false;
    auto* w = static_cast<QWidget*>(obj);
    if (w->hasFocus()) return false;
    // The parent chain gets the wheel instead (a scroll area's viewport scrolls).
    if (QWidget* p = w->parentWidget()) QCoreApplication::sendEvent(p, e);
    return true;
  }
};

}  // namespace

void install_wheel_guard() {
  static WheelGuard* guard = nullptr;
  if (guard || !qApp) return;
  guard = new WheelGuard(qApp);
  qApp->installEventFilter(guard);
}

}  // namespace attn::gui
